"""The mailbox service: runs, decisions and cancellations as durable dispatches, executed exactly once by the
process holding their thread's claim (see ``service.py``; the store side is ``contract/mailbox.py``)."""

from awaken_stdio.mailbox.service import (
    ErrorClass,
    MailboxConfig,
    MailboxService,
    classify_error,
    consumer_id,
    owner_is_dead,
)

__all__ = ["ErrorClass", "MailboxConfig", "MailboxService", "classify_error", "consumer_id", "owner_is_dead"]
