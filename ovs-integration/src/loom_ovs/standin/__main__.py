"""`python -m loom_ovs.standin`: serve a fleet of stand-in transport nodes."""

import sys

from loom_ovs.standin.fleet import main

sys.exit(main())
