"""Restart strategies: fixed delay counts attempts, failure rate counts failures in a sliding interval."""
from millstream.engine.common.restart_strategy import RestartStrategies
from millstream.engine.executiongraph.restart_backoff import RestartBackoffTimeStrategy


def test_fixed_delay_allows_the_configured_attempts():
    s = RestartBackoffTimeStrategy(RestartStrategies.fixed_delay_restart(2, 500))
    assert s.can_restart(0) and s.backoff_ms() == 500
    s.on_restart()
    s.on_restart()
    assert not s.can_restart(0)


def test_failure_rate_forgets_old_failures():
    s = RestartBackoffTimeStrategy(RestartStrategies.failure_rate_restart(2, 1000, 10))
    for t in (0, 100):
        s.notify_failure(t)
    assert s.can_restart(100)
    s.notify_failure(200)
    assert not s.can_restart(200)
    assert s.can_restart(1150)  # the failure at 0 and at 100 left the interval


def test_no_restart_and_defaults():
    assert not RestartBackoffTimeStrategy(RestartStrategies.no_restart()).can_restart(0)
    assert not RestartBackoffTimeStrategy.from_job_config({}).can_restart(0)
    with_cp = RestartBackoffTimeStrategy.from_job_config({"execution.checkpointing": {"interval_ms": 500}})
    assert with_cp.can_restart(0) and with_cp.backoff_ms() == 1000
