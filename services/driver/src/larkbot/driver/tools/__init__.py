"""The tools the model may call: the registry of every feature's router (``core/``), the handlers' shape."""
