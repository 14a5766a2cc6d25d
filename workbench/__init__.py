"""The Inference Workbench desktop app (Qt). The engine never imports this package."""
