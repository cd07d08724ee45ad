"""BatchSlicer: fast operators get whole buffers, slow ones slices that take about 50 ms each."""
from millstream.engine.runtime.batch_slicer import BatchSlicer


def test_a_fast_operator_keeps_whole_buffers() -> None:
    s = BatchSlicer()
    assert s.slice_size(1024) == 1024  # nothing measured yet
    s.took(1024, 0.002)  # 2 us a record
    assert s.slice_size(1024) == 1024


def test_a_slow_operator_is_handed_slices_of_about_the_target_time() -> None:
    s = BatchSlicer()
    s.took(1024, 2.048)  # 2 ms a record: a whole buffer would take two seconds
    assert s.slice_size(1024) == 25  # 50 ms / 2 ms
    for _ in range(20):
        s.took(25, 0.05)
    assert 24 <= s.slice_size(1024) <= 26


def test_the_estimate_follows_an_operator_that_speeds_up_and_never_slices_below_one() -> None:
    s = BatchSlicer()
    s.took(10, 10.0)  # a second a record
    assert s.slice_size(1024) == 1
    for _ in range(30):
        s.took(1, 0.00001)
    assert s.slice_size(1024) == 1024
    s.took(0, 1.0)  # nothing handed over: ignored
    assert s.slice_size(1024) == 1024
