"""`python -m ragen_cli.gpucheck`: run the checks, print their JSON line, exit 0 when all passed."""

from ragen_cli.gpucheck import main
from ragen_cli.process_exit import end_process

end_process(main())
