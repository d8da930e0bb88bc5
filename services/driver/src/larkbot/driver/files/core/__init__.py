"""The pure half of ``read_file``: its tool, which attachments it reads, what the model is told."""
