"""`rocketstore serve`: RocketMQ 5's gRPC protocol (apache.rocketmq.v2.MessagingService) over one store, so the
official RocketMQ 5 clients produce to and consume from it unchanged. Needs grpcio, protobuf and the v2 stubs of
rocketmq-python-client (`rocketmq.grpc_protocol`)."""
