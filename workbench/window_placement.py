"""Where layers run, from the main window (a mixin of MainWindow): moving layers to another
backend, and the placement for the inputs' current shapes.

Scripting surface: ``set_layer_backend(names, backend | None)`` (None: automatic again),
``layer_overrides``, ``set_input_shape(name, shape)``, signal ``placement_shown(dict)``
(the placement now drawn on the graph). Overrides are saved per model in the settings and
go into the exported Chrome trace.
"""

from __future__ import annotations

import hashlib

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QMenu

from engine import BackendType
from workbench import theme
from workbench.session import Session


def _settings_key(path: str) -> str:
    return "overrides/" + hashlib.sha1(path.encode("utf-8")).hexdigest()[:16]


class WindowPlacement:
    """Overrides (right-click menu, settings) and shape-dependent placement."""

    placement_shown = Signal(object)  # {layer: Placement}
    overrides_refused = Signal(str)

    def _connect_placement(self) -> None:
        self.graph.layer_menu_requested.connect(self._layer_menu)
        self.controller.overrides_refused.connect(self._on_overrides_refused)
        self.controller.plan_ready.connect(self._on_plan_ready)
        self.inputs.shapes_changed.connect(self._on_shapes_changed)
        self.session.subscribe(self._on_session_changed)

    def _on_session_changed(self, topic: str) -> None:
        if topic == "model":  # results of the previous model leave the panels
            self.memory_panel.update_timeline(None)
            self.compare_panel.show_result(None, self.session.threshold, None)
            if self.session.drop_compare():  # a comparison of the previous model is dropped
                self.compare_panel.set_idle("The comparison was dropped: another model "
                                            "was opened.")

    # -- overrides --------------------------------------------------------------------------
    @property
    def layer_overrides(self) -> dict[str, BackendType]:
        """{layer name: backend} the user chose (all backends; a worker takes its own)."""
        return dict(self.session.overrides)

    def set_layer_backend(self, names: list[str] | str, backend: BackendType | str | None
                          ) -> bool:
        """Run ``names`` on ``backend`` (the CPU, or the selected GPU backend) from the next run
        on; None puts them back to the engine's choice. The worker is rebuilt off the UI thread;
        a refusal (no kernel, CPU-forced) comes back as a message and the old choice stays."""
        if self.loaded is None:
            return False
        names = [names] if isinstance(names, str) else list(names)
        kind = None if backend is None else BackendType.parse(backend)
        if kind is not None and kind is not BackendType.CPU and kind is not self.backend:
            self.show_message("warning", f"Select {kind.name} as the backend first: a layer "
                              "can run on the CPU or on the selected backend")
            return False
        self.session.move_layers(names, kind)
        self._save_overrides()
        self._reprepare()
        return True

    def _reprepare(self) -> None:
        self.stop_run()
        self.session.rebuild_worker()  # the graph keeps the old colours until it is ready
        self.controller.prepare(self.backend, self.session.overrides_for(self.backend),
                                fallback=self.session.fallback_overrides(self.backend))

    def _on_overrides_refused(self, message: str) -> None:
        self.session.move_refused()
        self._save_overrides()
        self.show_message("warning", f"Cannot move the layer: {message}")
        self.overrides_refused.emit(message)

    def _saved_overrides(self, path: str) -> dict[str, BackendType]:
        """The overrides saved for the model at ``path``."""
        return Session.overrides_from_json(self.settings.value(_settings_key(path), "") or "")

    def _save_overrides(self) -> None:
        if self.session.model_path:
            key = _settings_key(self.session.model_path)
            if self.session.overrides:
                self.settings.setValue(key, Session.overrides_to_json(self.session.overrides))
            else:
                self.settings.remove(key)

    def _layer_menu(self, names: list[str], global_pos) -> None:
        menu = self.build_layer_menu(names)
        menu.exec(global_pos)

    def build_layer_menu(self, names: list[str]) -> QMenu:
        """The right-click menu for ``names``: run on the CPU / the GPU backend / automatic."""
        what = names[0] if len(names) == 1 else f"{len(names)} layers (the search matches)"
        menu = QMenu(self)
        menu.addSection(what)
        targets = [BackendType.CPU]
        if self.backend is not BackendType.CPU:
            targets.append(self.backend)
        for kind in targets:
            act = menu.addAction(f"Run on {theme.BACKEND_LABELS[kind]}")
            act.triggered.connect(lambda _=False, k=kind: self.set_layer_backend(names, k))
        auto = menu.addAction("Let the engine choose")
        auto.setEnabled(any(n in self.session.overrides for n in names))
        auto.triggered.connect(lambda: self.set_layer_backend(names, None))
        return menu

    # -- shapes -----------------------------------------------------------------------------
    def set_input_shape(self, name: str, shape: tuple[int, ...]) -> bool:
        """Give a symbolic input a concrete shape: new random values of that shape, and the
        graph shows the placement planned for it."""
        return self.inputs.set_shape(name, tuple(shape))

    def _on_shapes_changed(self, shapes: dict) -> None:
        for name, shape in shapes.items():
            self.session.set_input_shape(name, shape)
        if self.loaded is not None:
            self.controller.plan_for(shapes)

    def _plan_current_shapes(self) -> None:
        """After a worker is ready: plan for the inputs' shapes when they are not declared."""
        if self.loaded is None:
            return
        shapes = self.inputs.shapes()
        if any(not spec.is_static for spec in self.loaded.model.inputs) and shapes:
            self.controller.plan_for(shapes)

    def _on_plan_ready(self, kind: BackendType, shapes: dict, placement: dict) -> None:
        if shapes != self.inputs.shapes() or not self.session.set_placement(kind, placement):
            return
        self.graph.set_placement(placement)
        self.placement_shown.emit(placement)
