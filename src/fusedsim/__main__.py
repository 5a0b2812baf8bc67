import sys

from fusedsim.cli.main import main

sys.exit(main())
