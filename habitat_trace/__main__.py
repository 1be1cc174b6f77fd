from habitat_trace.cli import main

main()
