"""Colours and style shared by the graph, the timing plots and the legend."""

from __future__ import annotations

from engine import BackendType

#: placement colours (full strength: bars, node borders); light variants fill graph nodes
BACKEND_COLORS = {
    BackendType.CPU: "#4C78A8",
    BackendType.GPU_COMPUTE: "#2E9E6B",
    BackendType.GPU_PIXEL: "#8E5EA2",
}
BACKEND_LABELS = {
    BackendType.CPU: "CPU",
    BackendType.GPU_COMPUTE: "GPU compute",
    BackendType.GPU_PIXEL: "GPU pixel",
}
FALLBACK_COLOR = "#E8871E"
FORCED_COLOR = "#D6455B"
SYNC_COLOR = "#9C6B4E"   # time a CPU layer waited for queued GPU work (its own bar)
IO_COLOR = "#6B7280"
PENDING_COLOR = "#A0A7B4"
SELECT_COLOR = "#1F6FEB"
MATCH_COLOR = "#F2C12E"
EDGE_COLOR = "#9AA3AF"
TEXT_COLOR = "#1F2430"
BACKGROUND = "#F7F8FA"
USER_COLOR = "#111827"   # dotted outline: a layer the user moved to another backend
#: comparison colours: agrees (< threshold / 100), close (< threshold / 10), near, over
ERROR_COLORS = ("#3C9D5D", "#A3C45A", "#E8B31E", "#D6455B")


def error_class(rel_l2: float, threshold: float) -> int:
    """Index into ``ERROR_COLORS`` for a relative L2 error (NaN counts as over)."""
    if not rel_l2 <= threshold:
        return 3
    if rel_l2 > threshold / 10:
        return 2
    return 1 if rel_l2 > threshold / 100 else 0


def lighten(hex_color: str, amount: float = 0.75) -> str:
    """Blend ``hex_color`` toward white by ``amount`` (0..1)."""
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    r, g, b = (round(c + (255 - c) * amount) for c in (r, g, b))
    return f"#{r:02X}{g:02X}{b:02X}"


STYLESHEET = """
QMainWindow { background: #F0F2F5; }
QDockWidget::title { background: #E4E7EC; padding: 4px 8px; font-weight: 600; }
QToolBar { spacing: 6px; padding: 3px; border-bottom: 1px solid #D5D9E0; }
QGroupBox { font-weight: 600; border: 1px solid #D5D9E0; border-radius: 6px;
            margin-top: 10px; padding-top: 6px; background: white; }
QGroupBox::title { subcontrol-origin: margin; left: 8px; padding: 0 4px; }
QLabel#MessageBarText { color: #5B1A1A; }
QFrame#MessageBar[level="error"] { background: #FDECEC; border: 1px solid #E5A3A3;
                                   border-radius: 6px; }
QFrame#MessageBar[level="warning"] { background: #FFF6E0; border: 1px solid #E8C66A;
                                     border-radius: 6px; }
QFrame#MessageBar[level="info"] { background: #EAF2FE; border: 1px solid #9EC1F5;
                                  border-radius: 6px; }
QFrame#Legend { background: rgba(255, 255, 255, 225); border: 1px solid #D5D9E0;
                border-radius: 6px; }
"""
