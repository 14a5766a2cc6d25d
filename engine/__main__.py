try:
    from engine.cli import main
except KeyboardInterrupt:  # Ctrl-C while importing: no traceback either
    raise SystemExit(130) from None

raise SystemExit(main())
