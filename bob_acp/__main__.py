from bob_acp.cli import main

raise SystemExit(main())
