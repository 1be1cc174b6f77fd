"""habitat-trace: predict a PyTorch training step on another GPU from a torch.profiler trace.

Import cost matters (the CLI must start fast): this module imports nothing heavy.
"""
__version__ = "0.1.0"
