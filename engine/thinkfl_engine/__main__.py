import signal

# Ctrl-C reaches the whole process group; the driver (the train worker) decides when the
# engine stops, with a shutdown request or by closing stdin, so no KeyboardInterrupt here,
# not even while torch is still being imported.
signal.signal(signal.SIGINT, signal.SIG_IGN)

from .server import main  # noqa: E402 - after the signal disposition, on purpose

main()
