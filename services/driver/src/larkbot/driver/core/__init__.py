"""The pure core of the driver: no asyncio, NATS, SQL or HTTP. Everything here is a function of its
arguments (time is passed in), so it is tested table-driven and replayed in the benchmark."""
