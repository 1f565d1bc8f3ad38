from loop.ui.cli import main

raise SystemExit(main())
