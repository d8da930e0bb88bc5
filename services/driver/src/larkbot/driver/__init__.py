"""``larkbot.driver``: decides when the bot wakes, whether it acts (the probe gate), and runs its bounded
primary turns with the chat tools.

Entry points: :func:`larkbot.driver.app.main` (``larkbot run driver``) and the recipe
:class:`~larkbot.driver.app.DriverService`, whose ``build`` returns the wired replica
(:class:`~larkbot.driver.app.Driver`) and which reports its changes to the
:class:`~larkbot.driver.observer.DriverObserver` its options give; for operator tools,
:mod:`larkbot.driver.read` (the public read API) and :mod:`larkbot.driver.forget`.
``core/`` is pure; ``adapters/`` hold every await. Its test doubles, the scenario harness and its
benchmarks are in ``larkbot.testkit``. See ``docs/driver.md``.
"""
