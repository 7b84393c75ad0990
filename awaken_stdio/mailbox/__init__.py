"""mailbox."""
