"""protocols/acp."""
