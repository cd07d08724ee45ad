"""The data plane: buffer serialization, channels (in-memory and Redis) and record writers."""
