"""Where the workbench finds its resources (demo model, icons, sample inputs)."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESOURCES = os.path.join(ROOT, "resources")
DEMO_MODEL = os.path.join(RESOURCES, "digits_cnn.onnx")
