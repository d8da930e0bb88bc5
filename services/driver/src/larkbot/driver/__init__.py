"""``larkbot.driver``: decides when the bot wakes, whether it acts (the probe gate), and runs its bounded
primary turns with the chat tools.

Entry points: :func:`larkbot.driver.app.main` (``larkbot run driver``), :class:`~larkbot.driver.app.
DriverService`, :func:`larkbot.driver.bench.cacheable_prefix_ratio` (``larkbot bench``) and
:func:`larkbot.driver.harness.world` (an in-process driver with faked neighbours); for operator tools,
:mod:`larkbot.driver.read` (the public read API) and :mod:`larkbot.driver.forget`. ``core/`` is pure;
``adapters/`` hold every await. See ``docs/driver.md``.
"""
