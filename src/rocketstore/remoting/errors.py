"""Errors of the remoting protocol layer (RocketStoreErrors, and ValueErrors as bad input is)."""

from ..errors import RocketStoreError


class RemotingProtocolError(RocketStoreError, ValueError):
    """A frame, header or body that is not RocketMQ's remoting protocol. Read from a frame, the connection that
    sent it is closed, as RocketMQ's NettyDecoder closes the channel on a decode error; read from a request's body,
    the request is answered with SYSTEM_ERROR."""


class HeaderError(RocketStoreError, ValueError):
    """A request whose extFields lack a field its handler needs or carry one that does not parse (RocketMQ's
    RemotingCommandException from decodeCommandCustomHeader): answered with SYSTEM_ERROR."""
