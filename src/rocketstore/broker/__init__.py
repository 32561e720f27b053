"""The broker's state and rules over one store, whichever protocol a client speaks: what a client may name and
send (rules), transactions and their check-backs (transaction), timer and delay deliveries (delay), pop
consumption's state and its journal (pop, journal), subscription groups and FIFO order (fifo), and where the
broker listens (address). Nothing here knows gRPC or remoting: serve/ (gRPC, RocketMQ 5's proxy protocol) and
remoting/ (RocketMQ 4.x's) are the adapters over it."""
