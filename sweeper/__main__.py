from sweeper.entry import main

main()
