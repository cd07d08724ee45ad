"""UserCodeClassLoader: the classes a job's user code defines, found by name in every process.

Classes defined in the program itself (in ``__main__``, or in modules shipped by value next to it)
travel by value inside the cloudpickled user code, and each process rebuilds them from it. They
cannot be looked up by name there (a TaskManager's ``__main__`` is not the program), so plain
pickle refuses their instances. Loading the user code through ``load_user_code`` records those
classes under their ``module.qualname``; records and state then carry that name and the job's
loader turns it back into the class:

* the data plane writes an instance of a *plain* class (built by ``object.__new__``, described by
  its ``__dict__``) as ``(name, __dict__)`` in msgpack (see serialization.py): nothing is unpickled
  on the receiving side, and only classes registered from the job's signed user code are made;
* pickle (checkpoints, savepoints, on-disk state, the data plane's fallback for other classes)
  reduces an instance to ``_new_user_object(name, ...)``, resolved by the loader of the job whose
  task is running, so a savepoint restores into a resubmitted program (new class objects, same
  names), as Flink finds a POJO's class by name.
"""
from __future__ import annotations

import abc
import collections
import copyreg
import importlib
import io
import pickle
import threading
import weakref
from typing import Any, Iterable

# cloudpickle rebuilds a class it shipped by value with one of these (cloudpickle 3.x, pinned).
_SKELETONS = frozenset(
    {("cloudpickle.cloudpickle", "_make_skeleton_class"), ("cloudpickle.cloudpickle", "_make_skeleton_enum")}
)
_PICKLE_HOOKS = ("__reduce__", "__reduce_ex__", "__getstate__", "__setstate__", "__getnewargs__", "__getnewargs_ex__")


class UnknownUserClass(pickle.UnpicklingError):
    """A record or state names a class that the running job's user code does not define."""


def class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _importable(cls: type) -> bool:
    """Whether pickle finds ``cls`` by name in this process (it does for the program's own process)."""
    try:
        obj: Any = importlib.import_module(cls.__module__)
        for part in cls.__qualname__.split("."):
            obj = getattr(obj, part)
    except Exception:  # any failure means: not findable by name
        return False
    return obj is cls


def _is_plain(cls: type) -> bool:
    """Instances are fully described by their ``__dict__``: made by object.__new__, no slots, no
    pickling hooks of their own, an ordinary metaclass (ABCMeta is fine; Enum's is not)."""
    if type(cls) not in (type, abc.ABCMeta) or cls.__new__ is not object.__new__:
        return False
    for base in cls.__mro__[:-1]:
        d = base.__dict__
        if "__slots__" in d or any(h in d for h in _PICKLE_HOOKS):
            return False
    return True


# -- the process-wide view of every live loader's classes --------------------------------------
_lock = threading.Lock()
_refs: dict[type, int] = {}  # class -> live loaders holding it (tasks of one job share class objects)
_plain_names: dict[type, str] = {}  # plain classes -> name: the data plane's fast path
_pickled_by_name: set[type] = set()  # classes given a copyreg reducer (not findable by name here)
_live: "weakref.WeakSet[UserCodeClassLoader]" = weakref.WeakSet()
_active = threading.local()  # the running task's loader, set by the task on its own thread
# The classes of loaders that died, not yet unregistered. A loader's user code holds reference
# cycles (cloudpickle's classes), so the cyclic GC finalizes it at any allocation, also on a thread
# inside ``_register`` holding ``_lock``: a finalizer waiting for the lock would wait forever (a
# slot hung deploying its next job). The finalizer only queues; whoever holds the lock drains.
_released: "collections.deque[list[type]]" = collections.deque()


def plain_class_name(cls: type) -> str | None:
    """The name under which the data plane writes instances of ``cls``, if it is a plain user class."""
    return _plain_names.get(cls)


def _register(classes: list[type]) -> None:
    with _lock:
        _drain_released()
        for cls in classes:
            _refs[cls] = _refs.get(cls, 0) + 1
            if _refs[cls] > 1:
                continue
            if _is_plain(cls):
                _plain_names[cls] = class_name(cls)
            if not _importable(cls):
                copyreg.pickle(cls, _reduce_user_object)
                _pickled_by_name.add(cls)
        _drain_released()  # loaders the GC finalized while this held the lock


def _release(classes: list[type]) -> None:
    """A dead loader's finalizer: never blocks (see ``_released``)."""
    _released.append(classes)
    if _lock.acquire(blocking=False):  # held (maybe by this very thread): the holder drains
        try:
            _drain_released()
        finally:
            _lock.release()


def _drain_released() -> None:
    while _released:
        try:
            classes = _released.popleft()
        except IndexError:  # another thread's finalizer drained it
            return
        _unregister(classes)


def _unregister(classes: list[type]) -> None:
    """With ``_lock`` held."""
    for cls in classes:
        left = _refs.get(cls, 0) - 1
        if left > 0:
            _refs[cls] = left
            continue
        _refs.pop(cls, None)
        _plain_names.pop(cls, None)
        if cls in _pickled_by_name:
            _pickled_by_name.discard(cls)
            copyreg.dispatch_table.pop(cls, None)


class UserCodeClassLoader:
    """The classes one copy of a job's user code defined by value, by name."""

    def __init__(self, classes: Iterable[type]) -> None:
        by_name: dict[str, type] = {}
        ambiguous: set[str] = set()
        unique: list[type] = []
        for cls in classes:
            if not isinstance(cls, type) or cls in unique:
                continue
            unique.append(cls)
            name = class_name(cls)
            if by_name.setdefault(name, cls) is not cls:
                ambiguous.add(name)  # e.g. a class defined in a function called twice
        for name in ambiguous:
            del by_name[name]
        self._by_name = by_name
        self.ambiguous = frozenset(ambiguous)
        kept = [c for c in unique if class_name(c) in by_name]
        _register(kept)
        weakref.finalize(self, _release, kept)
        _live.add(self)

    @property
    def names(self) -> list[str]:
        return sorted(self._by_name)

    def resolve(self, name: str) -> type | None:
        return self._by_name.get(name)

    def activate(self) -> None:
        """Make this the loader that resolves class names on the calling thread (a task's own)."""
        _active.loader = self


def resolve_class(name: str) -> type:
    """The class named in a record or in state: the running task's job first; elsewhere (a client
    reading collected results) the one class of that name among the loaders of this process."""
    loader = getattr(_active, "loader", None)
    if loader is not None:
        cls = loader.resolve(name)
        if cls is not None:
            return cls
    found = {cls for cls in (lo.resolve(name) for lo in list(_live)) if cls is not None}
    if len(found) == 1:
        return found.pop()
    if not found:
        raise UnknownUserClass(f"class {name} is not defined by the job's user code")
    raise UnknownUserClass(f"class {name} is defined by several jobs in this process and no task is running here")


def _new_user_object(name: str, *args: Any) -> Any:
    cls = resolve_class(name)
    return cls.__new__(cls, *args)


def _new_user_object_ex(name: str, args: tuple, kwargs: dict) -> Any:
    cls = resolve_class(name)
    return cls.__new__(cls, *args, **kwargs)


def _call_user_class(name: str, *args: Any) -> Any:
    return resolve_class(name)(*args)


def _reduce_user_object(obj: Any) -> Any:
    """copyreg reducer for instances of user classes pickle cannot find by name: the class is
    replaced by its name in whatever the object's own reduction returns."""
    cls = type(obj)
    rv = obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    if isinstance(rv, str):
        return rv
    func, args, *rest = rv
    name = class_name(cls)
    if func is copyreg.__newobj__ and args and args[0] is cls:
        return (_new_user_object, (name, *args[1:]), *rest)
    if func is copyreg.__newobj_ex__ and args and args[0] is cls:  # type: ignore[attr-defined]
        return (_new_user_object_ex, (name, args[1], args[2]), *rest)
    if func is cls:  # e.g. an Enum member: Color(value)
        return (_call_user_class, (name, *args), *rest)
    return rv


# -- loading user code ---------------------------------------------------------------------
class _RecordingUnpickler(pickle.Unpickler):
    """Unpickles like cloudpickle.loads, noting every class rebuilt by value on the way."""

    def __init__(self, data: bytes, found: list[type]) -> None:
        super().__init__(io.BytesIO(data))
        self._found = found

    def find_class(self, module: str, name: str) -> Any:
        obj = super().find_class(module, name)
        if (module, name) not in _SKELETONS:
            return obj
        found = self._found

        def make(*args: Any) -> Any:
            cls = obj(*args)
            found.append(cls)
            return cls

        return make


def load_user_code(code: bytes) -> Any:
    """Unpickle a job's user code (a cloudpickled StreamGraph); the graph gets the job's loader as
    ``class_loader``, which the task activates on its thread."""
    found: list[type] = []
    graph = _RecordingUnpickler(code, found).load()
    loader = UserCodeClassLoader(found)  # names are final now: class bodies were filled after the skeletons
    try:
        graph.class_loader = loader
    except AttributeError:  # not a StreamGraph: the caller keeps the loader alive itself
        pass
    return graph


def activate_user_code(graph: Any) -> None:
    """Called by a task on its own thread: names in records and state resolve to its job's classes."""
    loader = getattr(graph, "class_loader", None)
    if loader is not None:
        loader.activate()


_client_loaders: list[UserCodeClassLoader] = []


def register_pickled_classes() -> UserCodeClassLoader:
    """In the client, after the user code was pickled: the classes cloudpickle shipped by value, so
    results collected from the cluster turn back into the program's own classes."""
    from cloudpickle import cloudpickle as cp  # the tracker of classes pickled by value

    with cp._DYNAMIC_CLASS_TRACKER_LOCK:
        classes = [c for c in list(cp._DYNAMIC_CLASS_TRACKER_BY_CLASS.keys()) if isinstance(c, type)]
    loader = UserCodeClassLoader(classes)
    _client_loaders[:] = [loader]  # the latest submission's view replaces the previous one
    return loader
