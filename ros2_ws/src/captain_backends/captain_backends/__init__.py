"""CaPtain robot backends: drivers under one interface."""
