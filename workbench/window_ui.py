"""Building the main window's widgets, menus, toolbar and docks (a mixin of MainWindow)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from engine import BackendType
from workbench import theme
from workbench.details_view import DetailsPanel
from workbench.graph_view import GraphView
from workbench.inputs_view import InputsPanel
from workbench.memory_view import MemoryPanel
from workbench.outputs_view import OutputsPanel
from workbench.paths import DEMO_MODEL
from workbench.timing_view import TimingPanel
from workbench.widgets import MessageBar, StableLabel


class WindowUi:
    """Creates the window's parts; ``MainWindow`` wires them to the controller."""

    def _build_ui(self) -> None:
        self.graph = GraphView()
        self.message_bar = MessageBar()
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search layers by name or op type — Enter jumps to next")
        self.search.setClearButtonEnabled(True)
        self.search_count = QLabel("")
        fit = QPushButton("Fit all")
        fit.clicked.connect(self.graph.fit_all)
        top = QPushButton("Fit width")
        top.clicked.connect(self.graph.fit_top)
        zin, zout = QPushButton("+"), QPushButton("−")
        zin.setFixedWidth(32)
        zout.setFixedWidth(32)
        zin.clicked.connect(lambda: self.graph.zoom(1.25))
        zout.clicked.connect(lambda: self.graph.zoom(0.8))
        bar = QHBoxLayout()
        bar.addWidget(self.search, 1)
        bar.addWidget(self.search_count)
        for w in (zout, zin, top, fit):
            bar.addWidget(w)
        central = QWidget()
        box = QVBoxLayout(central)
        box.setContentsMargins(6, 6, 6, 0)
        box.addWidget(self.message_bar)
        box.addLayout(bar)
        box.addWidget(self.graph.legend)
        box.addWidget(self.graph, 1)
        self.setCentralWidget(central)

        self.inputs = InputsPanel()
        self.details = DetailsPanel()
        self.outputs = OutputsPanel()
        self.timing = TimingPanel()
        self.memory_panel = MemoryPanel()
        self.docks = {}
        for key, title, widget, area in (
                ("inputs", "Inputs", self.inputs, Qt.DockWidgetArea.LeftDockWidgetArea),
                ("details", "Layer details", self.details, Qt.DockWidgetArea.RightDockWidgetArea),
                ("outputs", "Outputs", self.outputs, Qt.DockWidgetArea.RightDockWidgetArea),
                ("timing", "Live timing", self.timing, Qt.DockWidgetArea.BottomDockWidgetArea),
                ("memory", "Memory", self.memory_panel, Qt.DockWidgetArea.BottomDockWidgetArea)):
            dock = QDockWidget(title, self)
            dock.setObjectName(f"dock_{key}")
            dock.setWidget(widget)
            self.addDockWidget(area, dock)
            self.docks[key] = dock
        self.tabifyDockWidget(self.docks["timing"], self.docks["memory"])
        self.docks["timing"].raise_()
        self.resizeDocks([self.docks["inputs"], self.docks["details"]], [330, 360],
                         Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["timing"]], [380], Qt.Orientation.Vertical)
        self.resizeDocks([self.docks["details"], self.docks["outputs"]], [330, 240],
                         Qt.Orientation.Vertical)

        self.act_open = QAction("&Open model…", self, shortcut=QKeySequence.StandardKey.Open)
        self.act_demo = QAction("Open &demo model", self)
        self.act_trace = QAction("Export Chrome &trace…", self)
        self.act_csv = QAction("Export &CSV…", self)
        self.act_quit = QAction("&Quit", self, shortcut=QKeySequence.StandardKey.Quit)
        self.act_run = QAction("▶ Run once", self, shortcut=QKeySequence("Ctrl+R"))
        self.act_loop = QAction("⟳ Run continuously", self, shortcut=QKeySequence("Ctrl+Shift+R"))
        self.act_stop = QAction("■ Stop", self, shortcut=QKeySequence("Esc"))
        self.act_fit = QAction("Fit graph", self, shortcut=QKeySequence("F"))
        self.act_find = QAction("Find layer", self, shortcut=QKeySequence.StandardKey.Find)
        menu = self.menuBar().addMenu("&File")
        menu.addAction(self.act_open)
        self.recent_menu = menu.addMenu("Open &recent")
        menu.addAction(self.act_demo)
        menu.addSeparator()
        menu.addAction(self.act_trace)
        menu.addAction(self.act_csv)
        menu.addSeparator()
        menu.addAction(self.act_quit)
        run_menu = self.menuBar().addMenu("&Run")
        for a in (self.act_run, self.act_loop, self.act_stop):
            run_menu.addAction(a)
        view = self.menuBar().addMenu("&View")
        view.addAction(self.act_fit)
        view.addAction(self.act_find)
        view.addSeparator()
        for dock in self.docks.values():
            view.addAction(dock.toggleViewAction())

        tb = QToolBar("Run")
        tb.setObjectName("toolbar_run")
        tb.setMovable(False)
        tb.addAction(self.act_open)
        tb.addSeparator()
        tb.addWidget(QLabel(" Backend "))
        self.backend_combo = QComboBox()
        for kind in BackendType:
            self.backend_combo.addItem(theme.BACKEND_LABELS[kind], kind)
        tb.addWidget(self.backend_combo)
        tb.addSeparator()
        tb.addAction(self.act_run)
        tb.addAction(self.act_loop)
        tb.addAction(self.act_stop)
        self.addToolBar(tb)

        self.progress_label = StableLabel("", 360)
        self.progress_bar = QProgressBar()
        self.progress_bar.setMaximumWidth(220)
        self.progress_bar.setTextVisible(False)
        self.progress_bar.hide()
        self.status_model = QLabel("no model")
        self.status_run = StableLabel("", 330)
        self.status_run.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        sb = self.statusBar()
        sb.addWidget(self.progress_label)
        sb.addWidget(self.progress_bar)
        sb.addPermanentWidget(self.status_run)
        sb.addPermanentWidget(self.status_model)

    def _connect(self) -> None:
        c = self.controller
        c.model_ready.connect(self._on_model_ready)
        c.load_failed.connect(self._on_load_failed)
        c.progress.connect(self._on_progress)
        c.backends_probed.connect(self._on_backends_probed)
        c.worker_ready.connect(self._on_worker_ready)
        c.worker_failed.connect(self._on_worker_failed)
        c.result_ready.connect(self._on_result_ready)
        c.run_failed.connect(self._on_run_failed)
        c.run_finished.connect(self._on_run_finished)
        c.intermediate_ready.connect(self.details.show_intermediate)
        self.graph.layer_clicked.connect(lambda n: self.select_layer(n, center_graph=False))
        self.graph.drawn.connect(self._on_graph_drawn)
        self.timing.layer_clicked.connect(self.select_layer)
        self.memory_panel.layer_clicked.connect(self.select_layer)
        self.inputs.problem.connect(lambda text: self.show_message("error", text))
        self.inputs.changed.connect(self._on_inputs_changed)
        self.search.textChanged.connect(self._on_search)
        self.search.returnPressed.connect(self._next_match)
        self.backend_combo.currentIndexChanged.connect(self._on_combo)
        self.act_open.triggered.connect(self._open_dialog)
        self.act_demo.triggered.connect(lambda: self.open_model(DEMO_MODEL))
        self.act_trace.triggered.connect(lambda: self._export_dialog("trace"))
        self.act_csv.triggered.connect(lambda: self._export_dialog("csv"))
        self.act_quit.triggered.connect(self.close)
        self.act_run.triggered.connect(lambda: self.start_run(False))
        self.act_loop.triggered.connect(lambda: self.start_run(True))
        self.act_stop.triggered.connect(self.stop_run)
        self.act_fit.triggered.connect(self.graph.fit_all)
        self.act_find.triggered.connect(lambda: self.search.setFocus())

