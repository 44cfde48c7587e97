# Engine gates against the PyTorch reference (filled in by the engine gate work).
