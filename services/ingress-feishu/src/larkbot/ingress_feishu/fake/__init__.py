"""A fake Feishu for tests and the local playground (real HTTP and WebSocket, real wire format)."""
