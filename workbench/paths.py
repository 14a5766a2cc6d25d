"""Where the workbench finds its resources (demo model, icons, sample inputs).

They ship inside the ``workbench`` package (package data), so an installed copy finds
them from any directory, just as a source checkout does.
"""

from importlib.resources import files

RESOURCES = str(files("workbench").joinpath("resources"))
DEMO_MODEL = str(files("workbench").joinpath("resources", "digits_cnn.onnx"))
