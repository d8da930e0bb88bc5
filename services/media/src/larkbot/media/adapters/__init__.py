"""Adapters of the media workers: the bus, the buckets, the ingress and the vision model."""
