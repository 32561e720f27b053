"""RocketMQ's remoting protocol, the one RocketMQ 4.x clients (Java DefaultMQProducer and friends, the C++ core and
the clients built on it) and mqadmin speak: the codec (codes, fastjson, header_json, header_binary, frame), an
asyncio server (server), and a name server on it (namesrv)."""
