"""Reminders (docs/driver.md "Reminders"): ``set_reminder``, ``cancel_reminder``, ``list_reminders`` and
the delivery of due reminders as runtime events."""
