"""The bottleneck finder: the busy vertex whose upstream is backpressured."""
from millstream.backend.ui.backpressure_view import BackpressureVertex, find_bottleneck


def _v(vid: str, ratio: float, busy: float, sampled: bool = True) -> BackpressureVertex:
    return BackpressureVertex(vid, f"vertex {vid}", sampled, "ok", ratio, busy, ())


def test_names_the_busy_vertex_behind_a_backpressured_upstream() -> None:
    vertices = [_v("src", 0.9, 0.05), _v("map", 0.0, 0.97), _v("sink", 0.0, 0.1)]
    b = find_bottleneck(vertices, [("src", "map"), ("map", "sink")])
    assert b is not None and b.vertex_id == "map" and b.upstream == ("vertex src",)


def test_a_busy_vertex_with_a_free_flowing_upstream_is_not_a_bottleneck() -> None:
    vertices = [_v("src", 0.05, 0.1), _v("map", 0.0, 0.99)]
    assert find_bottleneck(vertices, [("src", "map")]) is None


def test_a_backpressured_upstream_of_an_idle_vertex_is_not_enough() -> None:
    # the real bottleneck is further down; the idle middle vertex must not be named
    vertices = [_v("src", 0.8, 0.1), _v("mid", 0.7, 0.2), _v("slow", 0.0, 0.95)]
    b = find_bottleneck(vertices, [("src", "mid"), ("mid", "slow")])
    assert b is not None and b.vertex_id == "slow"


def test_the_busiest_candidate_wins_and_unsampled_vertices_are_ignored() -> None:
    vertices = [_v("s1", 0.6, 0.0), _v("a", 0.0, 0.7), _v("s2", 0.6, 0.0), _v("b", 0.0, 0.9), _v("c", 0.0, 1.0, sampled=False)]
    b = find_bottleneck(vertices, [("s1", "a"), ("s2", "b"), ("s2", "c")])
    assert b is not None and b.vertex_id == "b"
    assert find_bottleneck([], []) is None
