"""The human Approval console: a web page where a MissionOwner sees their Missions, reads one
awaiting Approval in full (its revision, WorkItems, Evidence per criterion and Artifacts, their
hashes checked) and approves it or requests changes, signing in their own browser.

``server`` is the HTTP server, ``login`` the challenge-response login, ``reading`` what a page
shows, ``decisions`` the documents a decision signs. docs/console.md says how to use it.
"""
