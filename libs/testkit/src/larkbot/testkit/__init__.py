"""``larkbot.testkit``: what LarkBot's tests and benchmarks stand on, kept out of the services.

Stand-ins for sibling services, harnesses that run a service in-process against them, builders of
synthetic input, the in-memory ports of the driver's wake-up flow, and the measurements of ``larkbot
bench``. A service package ships none of it, and carries no test hook: where a test or a benchmark must
wait for a service, the service reports its changes to an *observer* passed in at construction
(``larkbot.driver.observer``, ``larkbot.pipeline.observer``, the Feishu contact-name table's
``ContactsObserver``), and the testkit's observers turn those reports into conditions
(:mod:`.conditions`).

The fakes of the outside world — the Feishu OpenAPI, the Telegram Bot API and the LLM providers, as real
HTTP servers — are not here: they are product (the playground runs on them) and live in their services'
``fake`` packages. Process-level machinery of the cross-service suites (the stack of service processes,
chaos, verdicts) stays in the repository's ``tests/harness``.

======================================  ================================================================
module                                  what it holds
======================================  ================================================================
``conditions``                          :class:`~.conditions.Conditions`: wait for a predicate, re-checked
                                        whenever an observer reports
``driver.harness``                      ``world()``: driver replicas in-process with their neighbours
                                        faked and one manual clock (the driver's scenario tests)
``driver.watch``                        ``DriverWatch``: a replica's observer (applied, balanced, settled)
``driver.fakes``, ``driver.fake_pipeline``
                                        the scripted LLM gateway, platform, media worker and pipeline as
                                        seen from the driver, on the real bus
``driver.scripted``                     ``ScriptedPorts``: the wake-up flow's ports in memory
``driver.synthetic``                    builders of segments and model answers
``pipeline.synthetic``                  builders of canonical events, ``chat_traffic()``
``pipeline.fakes``                      ``FakeMediaWorker`` on the ``MEDIA`` work queue
``pipeline.watch``                      ``PipelineWatch`` (events handled), ``caught_up()``
``media.fakes``, ``media.samples``      the ingress's downloads and the vision model as media sees them;
                                        synthetic photos, animations and containers
``ingress_feishu.watch``                ``ContactsWatch``: when a contact-name mirror caught up
``actions``                             ``acting_actions()``: one action of every kind that acts on the
                                        platform (what ``fetch.<platform>`` refuses)
``exports``                             the public-API check of the libraries: ``__all__`` against
                                        ``vars()``, the httpx way
``bench.report``                        ``larkbot bench``: every measurement below, in one JSON report
``bench.gateway``, ``bench.pipeline``,  the figures of ``docs/performance.md``: gateway overhead,
``bench.media``, ``bench.memory``,      pipeline throughput and cold replay, thumbnails, memory search,
``bench.prefix``, ``bench.replay``,     the cacheable prefix (pure and through the real services),
``bench.longchat``, ``bench.turn``      the long chat, the turn overhead of the services as processes
======================================  ================================================================

The testkit depends on every service and on the CLI (the turn benchmark starts the services as
``larkbot run`` processes); nothing but tests and ``larkbot bench`` imports it. It is a development
dependency of the workspace: ``make install`` installs it, a deployment image leaves it out.
"""
