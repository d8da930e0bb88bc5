"""What every LarkBot service shares: the bus, the ways in, dead letters, retries, periodic work and
leadership, the process lifecycle.

The ways a message enters a service — each built through one middleware chain (:mod:`.chain`: log
context → metrics → outcome policy → handler), each mapping outcomes in exactly one place:

=====================================  ======================================  ============================
kind                                   for                                     outcome → what happens
=====================================  ======================================  ============================
:class:`.consume.PullConsumer`         a durable, acked JetStream consumer     ack / nak(delay) /
                                       (media jobs, the driver's partitions)   dead letter + term
:class:`.reader.PartitionReader`       a partition read from the resume point  restart from the offsets
                                       its owner's database holds (pipeline)
:func:`.reader.read_subject`           one read of a subject (object chunks)   raises
:class:`.serve.Endpoint`               request/reply on a queue group          the reply (typed error)
:class:`.subscribe.Subscription`       ephemeral core messages (typing,        log and count
                                       media results)
:class:`.watch.KvWatch`                a mirror of a KV bucket                 log and count
=====================================  ======================================  ============================

Consumers are declared only by :mod:`.bootstrap` (the durable ones of ``names.CONSUMERS`` at start-up;
partition and reader consumers through its ``declare_*`` functions at run time); services bind.
:mod:`.deadletter` is the one dead-letter writer, :mod:`.retry` (:mod:`.backoff`) the one retry policy,
:mod:`.periodic` the one periodic loop and :mod:`.leadership` the one singleton lease.

The package itself exports nothing: the API is its public modules, each with an ``__all__`` of what it
defines (pinned from ``vars()`` by ``libs/runtime/tests/test_runtime_public_api.py``).

Exceptions: one tree, rooted in :mod:`larkbot.canonical.errors`; transient versus permanent is the type,
never a flag::

    LarkbotError
    ├── ConfigError                      (canonical) invalid configuration, with the key's path
    ├── ContractError                    (canonical) does not fit the wire contract: never retried
    ├── RetryableError                   (canonical) transient: try again after .delay_s
    │   ├── BusUnavailable               bus: NATS did not answer
    │   │   ├── NoResponders             bus: nobody serves the subject
    │   │   ├── StreamFull               bus: a stream at its limit refused the publish
    │   │   ├── RequestTimedOut          bus: no reply in time
    │   │   ├── ServiceUnavailable       bus: the service answered a retryable ServiceError
    │   │   └── ConsumerGone             pull: the consumer pulled from does not exist
    │   ├── BootstrapFailed              bootstrap: the cluster did not answer for an asset in time
    │   ├── DeadLetterFailed             deadletter: the record was not written; the input stays
    │   │                                unacknowledged and comes back
    │   └── SequenceGap                  reader: a delivery was skipped; the partition restarts
    ├── PermanentError                   (canonical) well-formed, can never succeed: dead-lettered
    │   ├── ServiceRefused               bus: the service answered a final ServiceError
    │   ├── BootstrapRefused             bootstrap: the server refused an asset as configured
    │   └── PayloadTooLarge              bus: larger than the server's max_payload
    └── NatsServerError                  natsserver: the embedded server did not start
"""

__all__: list[str] = []
