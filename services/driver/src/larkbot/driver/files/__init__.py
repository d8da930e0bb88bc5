"""The ``read_file`` tool: a document attachment's text, read on request (docs/driver.md "read_file")."""
