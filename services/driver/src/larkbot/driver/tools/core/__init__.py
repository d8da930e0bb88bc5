"""The tool schemas and their validation; pure."""
