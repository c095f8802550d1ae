"""The capacity port: can the candidate's pods be scheduled in this cluster?"""
