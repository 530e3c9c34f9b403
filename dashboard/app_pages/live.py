import streamlit as st

st.title("live")
st.info("This page is being built.")
