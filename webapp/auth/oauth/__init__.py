"""oauth"""
