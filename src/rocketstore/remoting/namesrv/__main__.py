"""Run the name server alone, for trying it with RocketMQ's clients and mqadmin:
python -m rocketstore.remoting.namesrv [--listen HOST:PORT] [--kv-config PATH] [-v]"""

import argparse
import asyncio
import logging
import signal

from . import DEFAULT_PORT, NameServer, NamesrvSettings


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m rocketstore.remoting.namesrv")
    p.add_argument("--listen", default=f"0.0.0.0:{DEFAULT_PORT}", help="HOST:PORT (default %(default)s)")
    p.add_argument("--kv-config", default="", help="kvConfig.json to keep the KV config in")
    p.add_argument("-v", "--verbose", action="store_true", help="log every request")
    args = p.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(message)s")

    async def run():
        ns = NameServer(NamesrvSettings(kvConfigPath=args.kv_config))
        if args.verbose:
            ns.server.on_request = lambda cmd, conn: logging.debug(
                "%s code=%d version=%d ext=%s body=%d bytes", conn.remote, cmd.code, cmd.version, cmd.ext_fields,
                len(cmd.body),
            )  # fmt: skip
        # Ctrl-C or SIGTERM: the server closes its connections and stops, instead of an interrupt landing
        # wherever the loop happens to be (set before the line that says it listens: a caller may stop it then)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        bound = await ns.start(host or "0.0.0.0", int(port))
        print(f"name server listening on {host or '0.0.0.0'}:{bound}", flush=True)
        await stop.wait()
        await ns.close()

    asyncio.run(run())


if __name__ == "__main__":
    main()
