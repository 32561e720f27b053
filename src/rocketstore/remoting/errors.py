"""Errors of the remoting protocol layer."""


class RemotingProtocolError(ValueError):
    """A frame or header that is not RocketMQ's remoting protocol: the connection that sent it is closed, as
    RocketMQ's NettyDecoder closes the channel on a decode error."""


class HeaderError(ValueError):
    """A request whose extFields lack a field its handler needs or carry one that does not parse (RocketMQ's
    RemotingCommandException from decodeCommandCustomHeader): answered with SYSTEM_ERROR."""
