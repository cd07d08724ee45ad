"""``pyflink.common.serialization``: how connectors turn records into bytes and back.

``Encoder`` writes one record of a row-format ``FileSink``; ``SimpleStringSchema``
is the (de)serialization schema of message connectors such as the Redis Streams
source and sink. Both are plain, picklable descriptions: they run inside tasks.
"""
from __future__ import annotations

from typing import Any


class SerializationSchema:
    """Turns one record into the bytes a connector writes."""

    def serialize(self, value: Any) -> bytes:
        raise NotImplementedError


class DeserializationSchema:
    """Turns the bytes a connector read back into one record."""

    def deserialize(self, message: bytes) -> Any:
        raise NotImplementedError


class SimpleStringSchema(SerializationSchema, DeserializationSchema):
    """Records are strings: ``str(value)`` encoded in ``charset`` (UTF-8 by default)."""

    def __init__(self, charset: str = "UTF-8") -> None:
        _check_charset(charset)
        self.charset = charset

    def serialize(self, value: Any) -> bytes:
        return str(value).encode(self.charset)

    def deserialize(self, message: bytes) -> Any:
        return message.decode(self.charset)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SimpleStringSchema) and other.charset == self.charset

    def __hash__(self) -> int:
        return hash(("SimpleStringSchema", self.charset))


class Encoder:
    """Writes one record of a row-format file: PyFlink's ``Encoder.simple_string_encoder()``.

    ``encode(value)`` returns the record's bytes including its line separator,
    so a sink writes them as they are and the Spark runner can do the same.
    """

    def __init__(self, charset: str = "UTF-8", kind: str = "simple_string") -> None:
        _check_charset(charset)
        self.charset = charset
        self.kind = kind

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> "Encoder":
        """``str(value)`` followed by ``\\n``, in ``charset_name``."""
        return Encoder(charset_name)

    def encode(self, value: Any) -> bytes:
        return (str(value) + "\n").encode(self.charset)

    def __repr__(self) -> str:
        return f"Encoder.simple_string_encoder({self.charset!r})"


def _check_charset(charset: str) -> None:
    import codecs

    try:
        codecs.lookup(charset)
    except LookupError:
        raise ValueError(f"unknown charset {charset!r}") from None


class ByteArraySchema(SerializationSchema, DeserializationSchema):
    """Records are ``bytes`` and pass through unchanged."""

    def serialize(self, value: Any) -> bytes:
        if not isinstance(value, (bytes, bytearray)):
            raise TypeError(f"ByteArraySchema serializes bytes, got {type(value).__name__}")
        return bytes(value)

    def deserialize(self, message: bytes) -> Any:
        return bytes(message)


class RowFieldExtractorSchema(SerializationSchema):
    """Serializes one field of a Row (or tuple), which must be bytes, as Flink's schema of that name."""

    def __init__(self, field_index: int) -> None:
        if field_index < 0:
            raise ValueError(f"the field index must not be negative, got {field_index}")
        self.field_index = field_index

    def serialize(self, value: Any) -> bytes:
        field = value[self.field_index]
        if field is None:
            return b""
        if not isinstance(field, (bytes, bytearray)):
            raise TypeError(f"field {self.field_index} must be bytes, got {type(field).__name__}")
        return bytes(field)


from millstream.engine.compat.unsupported import declare_unsupported  # noqa: E402 (placeholders defined last)

declare_unsupported(
    globals(),
    ["BulkWriterFactory"],
    why="bulk (columnar) writers are Java-side formats; Millstream's FileSink writes row formats",
    instead="FileSink.for_row_format(path, Encoder.simple_string_encoder())",
)
