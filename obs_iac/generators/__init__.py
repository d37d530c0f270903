"""Built-in generators (backends): plan -> artifacts. Each registered by entry point."""
