"""The PyTorch reference run's modules (harness/torch_reference.py is the command)."""
