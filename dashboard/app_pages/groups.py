import streamlit as st

st.title("groups")
st.info("This page is being built.")
