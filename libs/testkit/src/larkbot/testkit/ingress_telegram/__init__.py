"""ingress-telegram as tests reach it."""
